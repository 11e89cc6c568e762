import { RedisClusterTopology, RedisSentinelTopology } from '../support/redis-topology.js';
import { topologyContract } from './redis-topology.contract.js';

// One file, so the two topologies (and their gateways under load) run one after the other
// instead of side by side on a machine whose other suites time Redis commands too.
topologyContract('Redis Cluster (3 masters, 3 replicas)', () => RedisClusterTopology.start());
topologyContract('Redis Sentinel (3 sentinels, a master and 2 replicas)', () => RedisSentinelTopology.start());
