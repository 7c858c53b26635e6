//! The startup phase's packets: StartupMessage, SSLRequest, GSSENCRequest, CancelRequest.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| quire_server::fuzzing::startup(data));
