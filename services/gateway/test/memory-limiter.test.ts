import { MemoryKeyLimiter } from '../src/limits/memory-key-limiter.js';
import { limiterContract } from './limiter.contract.js';

limiterContract('memory', async (ban) => {
  let offset = 0;
  const limiter = new MemoryKeyLimiter(ban, () => Date.now() + offset);
  return {
    limiter,
    endMinuteWindow: async () => {
      offset += 60_000;
    },
    endGrace: async () => {
      offset += ban.graceMs;
    },
    cleanup: async () => {},
  };
});
