/// A digest of an agent naming the file it is installed as (FNV-1a, 64 bits): distinct
/// builds get distinct names, so a running sandbox's agent is never replaced. Shared by
/// the build script (the embedded agent) and the library (an operator's agent).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
