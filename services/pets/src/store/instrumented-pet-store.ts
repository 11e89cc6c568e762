import { Histogram, type Registry } from 'prom-client';
import type { PetStore } from './pet-store.js';

/** Wraps a store so every call is timed by operation and outcome, whatever the backend. */
export function instrumentStore(store: PetStore, registry: Registry): PetStore {
  const duration = new Histogram({
    name: 'pets_store_operation_duration_seconds',
    help: 'Pet store call latency by operation and outcome',
    labelNames: ['operation', 'outcome'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  async function timed<T>(operation: string, call: () => Promise<T>): Promise<T> {
    const end = duration.startTimer({ operation });
    try {
      const result = await call();
      end({ outcome: 'ok' });
      return result;
    } catch (err) {
      end({ outcome: 'error' });
      throw err;
    }
  }
  return {
    create: (newPet) => timed('create', () => store.create(newPet)),
    get: (id) => timed('get', () => store.get(id)),
    list: (options) => timed('list', () => store.list(options)),
    ping: () => timed('ping', () => store.ping()),
  };
}
