//! PLACEHOLDER: the simulated file system is being written by another change.
#[derive(Debug, Default)]
pub struct SimVfs;
#[derive(Debug, Default)]
pub struct CrashOptions;
