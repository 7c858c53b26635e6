//! A SCRAM-SHA-256 exchange: the client's first and final messages.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| quire_server::fuzzing::scram_exchange(data));
