//! A tiny deterministic generator (xorshift64) for seeded workloads: tests, benchmarks and
//! the torture tool. One generator for all of them, so "seed N" means the same everywhere.
//! Not for anything that needs unpredictability.

/// xorshift64. A zero seed is replaced by one, since zero is a fixed point.
#[derive(Clone, Debug)]
pub struct XorShift64(u64);

impl XorShift64 {
    pub fn new(seed: u64) -> Self {
        XorShift64(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next value.
    #[allow(clippy::should_implement_trait)] // not an Iterator: it never ends
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
