/**
 * A marker taken once in a process while it lasts: the memory stores' stand-in for Redis's
 * `SET name 1 PX ttl NX`, which picks one of the replicas (a webhook scan round, a metering pass).
 * `markers` maps a name to when it lapses; lapsed ones are dropped as a name is taken.
 */
export function takeMarker(markers: Map<string, number>, name: string, at: number, ttlMs: number): boolean {
  for (const [taken, until] of markers) if (until <= at) markers.delete(taken);
  if (markers.has(name)) return false;
  markers.set(name, at + ttlMs);
  return true;
}
