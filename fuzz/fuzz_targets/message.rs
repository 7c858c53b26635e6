//! Every typed frontend message: its header's bounds and its body's layout.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| quire_server::fuzzing::message(data));
