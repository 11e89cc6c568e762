#!/usr/bin/env bash
# npm run containers:setup — makes this machine able to run the container tier (npm run
# test:containers), and does it again only where something is missing. One line per step: what it
# did and how long it took. Details and the why of each step: docs/containers.md.
#
# With a Docker Engine that answers (and so, registry access to node, mongo and redis images) it
# only checks. Otherwise (the project's machines: no Docker, no reachable container registry) it
# installs Debian's podman and runc, starts podman's Docker-API socket with the project's own
# engine settings (deploy/containers/containers.conf, passed by CONTAINERS_CONF), and builds the
# base images locally from Debian packages and the Node binary already in node_modules.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

# Shared with tests/support/containers-env.ts, which points the tests at the same socket.
SOCKET_DIR=/run/animal-store
SOCKET=$SOCKET_DIR/podman.sock
export CONTAINERS_CONF=$REPO/deploy/containers/containers.conf
DEBIAN_IMAGE=animal-store/debian:bookworm
NODE_IMAGE=animal-store/node:24
REDIS_IMAGE=animal-store/redis:7
LABEL=org.animal-store.inputs

now() { date +%s%N; }
# step START "what happened": one line with the step's time.
step() { awk -v what="$2" -v ns=$(($(now) - $1)) 'BEGIN { printf "[containers:setup] %-60s %6.1f s\n", what, ns / 1e9 }'; }

t=$(now)
if [ -z "${DOCKER_HOST:-}" ] && [ -S /var/run/docker.sock ] && command -v docker >/dev/null 2>&1 \
  && docker info >/dev/null 2>&1; then
  step "$t" "Docker Engine answers at /var/run/docker.sock: nothing to set up"
  exit 0
fi

# 1. Packages. No recommends: only what runs containers as root on this host (netavark needs
# iptables for its bridge networks and published ports).
t=$(now)
need=()
for pair in podman:podman runc:runc debootstrap:debootstrap podman-compose:podman-compose \
  netavark:/usr/lib/podman/netavark aardvark-dns:/usr/lib/podman/aardvark-dns iptables:iptables curl:curl; do
  pkg=${pair%%:*} probe=${pair#*:}
  if [[ $probe == /* ]]; then [ -e "$probe" ] || need+=("$pkg"); else command -v "$probe" >/dev/null 2>&1 || need+=("$pkg"); fi
done
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  # Their output (debconf's notes among it) only when they fail: one line per step.
  apt_log=$(mktemp)
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}"; } >"$apt_log" 2>&1 \
    || { tail -20 "$apt_log" >&2; exit 1; }
  rm -f "$apt_log"
  step "$t" "installed ${need[*]}"
else
  step "$t" "reused podman, runc, debootstrap, podman-compose, netavark, iptables"
fi

# 2. The engine answers with the project's settings.
t=$(now)
podman info --format '{{.Host.OCIRuntime.Name}}' >/dev/null
step "$t" "podman $(podman version --format '{{.Client.Version}}') on runc, deploy/containers/containers.conf"

# 3. The Docker-API socket: started detached, so it outlives this script; reused when it answers
# with the settings it was started with (the service reads containers.conf once, at start).
t=$(now)
ping() { curl -sf --unix-socket "$SOCKET" http://d/_ping >/dev/null 2>&1; }
conf_hash=$(sha256sum "$CONTAINERS_CONF" | cut -c1-16)
if ping && [ "$(cat "$SOCKET_DIR/podman-service.conf" 2>/dev/null)" = "$conf_hash" ]; then
  step "$t" "reused the Docker-API socket $SOCKET"
else
  mkdir -p "$SOCKET_DIR"
  # One this script started before, with other settings: ended by its recorded id.
  if [ -f "$SOCKET_DIR/podman-service.pid" ]; then
    kill "$(cat "$SOCKET_DIR/podman-service.pid")" 2>/dev/null || true
    for _ in $(seq 1 50); do ping || break; sleep 0.2; done
  fi
  rm -f "$SOCKET"
  setsid podman system service --time=0 "unix://$SOCKET" >"$SOCKET_DIR/podman-service.log" 2>&1 </dev/null &
  echo $! >"$SOCKET_DIR/podman-service.pid"
  echo "$conf_hash" >"$SOCKET_DIR/podman-service.conf"
  for _ in $(seq 1 150); do ping && break; sleep 0.2; done
  ping || { echo "podman system service did not answer on $SOCKET: see $SOCKET_DIR/podman-service.log" >&2; exit 1; }
  step "$t" "started the Docker-API socket $SOCKET"
fi

# 4. Base images, each labelled with a hash of its inputs and rebuilt only when they change.
inputs_of() { podman image inspect --format "{{index .Labels \"$LABEL\"}}" "$1" 2>/dev/null || true; }
# Ids of base images about to be replaced by a rebuild, removed at the end.
replaced=()
replacing() { local id; id=$(podman image inspect --format '{{.Id}}' "$1" 2>/dev/null) && replaced+=("$id") || true; }
WORK=$(mktemp -d /var/tmp/animal-store-bases.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# Debian bookworm, minbase, plus what every image here needs: CA certificates and tini (PID 1).
t=$(now)
debian_inputs=$(printf 'minbase bookworm ca-certificates tini v1' | sha256sum | cut -c1-16)
if [ "$(inputs_of "$DEBIAN_IMAGE")" = "$debian_inputs" ]; then
  step "$t" "reused $DEBIAN_IMAGE"
else
  replacing "$DEBIAN_IMAGE"
  nice -n 5 debootstrap --variant=minbase --include=ca-certificates,tini bookworm "$WORK/rootfs" \
    http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
  rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/*
  tar -C "$WORK/rootfs" -c . | podman import --quiet --change "LABEL $LABEL=$debian_inputs" \
    --change 'CMD ["/bin/bash"]' - "$DEBIAN_IMAGE" >/dev/null
  rm -rf "$WORK/rootfs"
  step "$t" "built $DEBIAN_IMAGE (debootstrap minbase)"
fi

# The Node base and the Redis image both derive from the Debian base and build side by side: the
# one mostly copies files, the other mostly waits on Debian's mirror.
builds=()

# Node 24: the binary the root's `node` devDependency installed, npm from the registry's `npm`
# package, a non-root `node` user (uid 1000, as in the official image) and tini at /sbin/tini.
t=$(now)
node_bin=$(node -e 'process.stdout.write(process.execPath)')
node_version=$("$node_bin" --version)
case "$node_version" in v24.*) ;; *)
  echo "the node on PATH is $node_version, not 24: run this through npm (npm run containers:setup)" >&2; exit 1 ;;
esac
npm_version=$(npm view npm@11 version --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const v=JSON.parse(s);process.stdout.write([].concat(v).at(-1))})')
# The registry is reached through this host's TLS proxy: npm inside the image trusts what the
# host trusts (CA certificates only).
ca_bundle=$(npm config get cafile 2>/dev/null || true)
[ -f "$ca_bundle" ] || ca_bundle=/etc/ssl/certs/ca-certificates.crt
node_inputs=$(cat <(echo "$debian_inputs $node_version npm@$npm_version v1") "$ca_bundle" | sha256sum | cut -c1-16)
if [ "$(inputs_of "$NODE_IMAGE")" = "$node_inputs" ]; then
  step "$t" "reused $NODE_IMAGE (node $node_version, npm $npm_version)"
else
  replacing "$NODE_IMAGE"
  mkdir -p "$WORK/node"
  cp "$node_bin" "$WORK/node/node"
  cp "$ca_bundle" "$WORK/node/ca-certificates.crt"
  (cd "$WORK/node" && npm pack "npm@$npm_version" --silent >/dev/null && mv npm-*.tgz npm.tgz)
  cat >"$WORK/node/Containerfile" <<EOF
FROM $DEBIAN_IMAGE
COPY node /usr/local/bin/node
ADD npm.tgz /usr/local/lib/
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
RUN mv /usr/local/lib/package /usr/local/lib/node_modules/npm 2>/dev/null \\
 || { mkdir -p /usr/local/lib/node_modules && mv /usr/local/lib/package /usr/local/lib/node_modules/npm; } \\
 && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\
 && printf 'cafile=/etc/ssl/certs/ca-certificates.crt\nupdate-notifier=false\n' > /usr/local/etc/npmrc \\
 && ln -sf /usr/bin/tini /usr/sbin/tini \\
 && groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \\
 && node --version && npm --version && /sbin/tini --version
LABEL $LABEL=$node_inputs
CMD ["node"]
EOF
  { nice -n 5 podman build --quiet --network host -t "$NODE_IMAGE" "$WORK/node" >/dev/null
    step "$t" "built $NODE_IMAGE (node $node_version, npm $npm_version)"; } &
  builds+=($!)
fi

# Redis from Debian's redis-server. Like the official image's entrypoint, `redis-server` without a
# config file (the compose file's command) runs without protected mode, which would refuse every
# client from another container.
t=$(now)
redis_inputs=$(printf '%s redis-server v2' "$debian_inputs" | sha256sum | cut -c1-16)
if [ "$(inputs_of "$REDIS_IMAGE")" = "$redis_inputs" ]; then
  step "$t" "reused $REDIS_IMAGE"
else
  replacing "$REDIS_IMAGE"
  mkdir -p "$WORK/redis"
  cat >"$WORK/redis/entrypoint" <<'EOF'
#!/bin/sh
if [ "$1" = redis-server ] && { [ $# -eq 1 ] || [ "${2#--}" != "$2" ]; }; then
  shift
  exec redis-server --protected-mode no "$@"
fi
exec "$@"
EOF
  cat >"$WORK/redis/Containerfile" <<EOF
FROM $DEBIAN_IMAGE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null 2>&1 \\
 && rm -rf /var/lib/apt/lists/* && mkdir -p /data && chown redis:redis /data
COPY --chmod=755 entrypoint /usr/local/bin/redis-entrypoint
WORKDIR /data
USER redis
EXPOSE 6379
LABEL $LABEL=$redis_inputs
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/redis-entrypoint"]
CMD ["redis-server"]
EOF
  { nice -n 5 podman build --quiet --network host -t "$REDIS_IMAGE" "$WORK/redis" >/dev/null
    step "$t" "built $REDIS_IMAGE ($(podman run --rm --entrypoint redis-server "$REDIS_IMAGE" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'))"; } &
  builds+=($!)
fi
# A build that failed ends the script here, with its own error.
for pid in "${builds[@]}"; do wait "$pid"; done

# The base images a rebuild above replaced. Only those: `podman image prune` would also remove the
# unnamed stage images of the service builds, which are their layer cache (built from source, a
# warm rebuild of both service images takes ~35 s, a cold one ~7 min), and took ~2 min doing it.
t=$(now)
if [ ${#replaced[@]} -gt 0 ]; then
  # An old base that images still derive from stays until they go.
  for id in "${replaced[@]}"; do podman rmi "$id" >/dev/null 2>&1 || true; done
  step "$t" "removed the ${#replaced[@]} base image(s) rebuilt above, where nothing uses them"
fi
