import { MemoryKeyLimiter } from '../src/limits/memory-key-limiter.js';
import { limiterContract } from './limiter.contract.js';

limiterContract('memory', async (ban) => {
  // A clock that moves only when the test moves it: sliding buckets and refusals to the millisecond.
  let clock = Date.now();
  const now = () => clock;
  const limiter = new MemoryKeyLimiter(ban, now);
  return {
    limiter,
    now,
    advance: async (ms) => {
      clock += ms;
    },
    endMinuteWindow: async () => {
      clock += 60_000;
    },
    endGrace: async () => {
      clock += ban.graceMs;
    },
    cleanup: async () => {},
  };
});
