//! # rng — the one random generator of the project
//!
//! A tiny deterministic generator for everything seeded: tests, benchmarks, the torture tool
//! and the crash simulation of [`SimVfs`](crate::vfs::SimVfs). One generator for all of them,
//! so "seed N" means the same everywhere.
//!
//! ## Rules
//!
//! - **Deterministic.** The same seed gives the same sequence on every platform and build;
//!   nothing here reads the clock or the operating system. Changing this generator changes
//!   which rows, keys and crash schedules every seeded test and benchmark gets.
//! - **Not for secrets.** The sequence is predictable from any one output.
//! - **A leaf.** It imports nothing from the crate, so every layer may use it, `vfs` included.

/// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", 2014;
/// Java's `SplittableRandom`): a counter stepped by the golden ratio, each value scrambled by
/// a bijective mixing function.
///
/// Chosen over xorshift64, which quire used before, because:
/// - **every seed is a good seed.** Callers seed with `t + 1`, `seed * 7 + 3`, 0: SplitMix64
///   scrambles its counter, so neighbouring seeds give unrelated sequences from the first
///   value. xorshift64 has 0 as a fixed point (it had to replace that seed), and from a small
///   seed its first values have few bits set (seed 1 gives 0x4082_2041 first), so the torture
///   tool threw its first values away.
/// - **it passes BigCrush**, including in its low bits, which `% n` uses; xorshift64 is linear
///   over GF(2) and fails the binary-rank and linear-complexity tests.
/// - **the crash simulation already used it**: keeping its algorithm leaves every
///   [`SimVfs`](crate::vfs::SimVfs) crash schedule as it was.
///
/// Same cost (one add, two multiplies, three shifts per value) and period 2^64.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

/// The golden-ratio increment of the counter (2^64 / φ, odd: every state is visited).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`. Any seed is fine, 0 included.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next value, uniform over all of `u64`.
    #[allow(clippy::should_implement_trait)] // not an Iterator: it never ends
    pub fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n` > 0), by multiplying and keeping the high half (Lemire): no
    /// division, and a bias below n / 2^64, far under what any test or benchmark here can see.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0, "below(0) has no value to return");
        let value = ((u128::from(self.next()) * u128::from(n)) >> 64) as u64;
        debug_assert!(value < n.max(1));
        value
    }

    /// A value in `0.0..1.0`, from the top 53 bits (all an `f64` mantissa holds).
    pub fn next_f64(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`: never for `p <= 0.0`, always for `p >= 1.0`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }

    /// A fair coin.
    pub fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first values for seed 0 of the reference C code (Vigna's `splitmix64.c`): pins the
    /// algorithm, so that a change to it is noticed.
    #[test]
    fn matches_the_reference_sequence() {
        let mut rng = SplitMix64::new(0);
        let first: Vec<u64> = (0..3).map(|_| rng.next()).collect();
        assert_eq!(
            first,
            [
                0xE220_A839_7B1D_CDAF,
                0x6E78_9E6A_A1B9_65F4,
                0x06C4_5D18_8009_454F
            ]
        );
    }

    #[test]
    fn same_seed_same_sequence_and_neighbours_differ() {
        let take = |seed| {
            let mut rng = SplitMix64::new(seed);
            (0..8).map(|_| rng.next()).collect::<Vec<_>>()
        };
        assert_eq!(take(7), take(7));
        assert_ne!(take(7), take(8));
        // Neighbouring seeds' first values differ in about half their bits.
        let differing = (SplitMix64::new(1).next() ^ SplitMix64::new(2).next()).count_ones();
        assert!((16..=48).contains(&differing), "{differing} bits differ");
    }

    #[test]
    fn helpers_stay_in_range_and_cover_it() {
        let mut rng = SplitMix64::new(42);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            seen[rng.below(10) as usize] += 1;
            let unit = rng.next_f64();
            assert!((0.0..1.0).contains(&unit), "{unit}");
        }
        // Each of 10 values about 1,000 times: far outside these bounds means a broken helper.
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
        assert_eq!(rng.below(1), 0);
        assert!(!rng.chance(0.0));
        assert!(rng.chance(1.0));
        let heads = (0..10_000).filter(|_| rng.coin()).count();
        assert!((4_500..5_500).contains(&heads), "{heads} heads");
    }
}
