#[derive(Debug, thiserror::Error)]
pub enum «C1»Error {
    #[error("value {value} at index {index} is out of range")]
    OutOfRange { index: usize, value: u32 },
    #[error("overflow while computing «w1» (limit = {})", u32::MAX)]
    Overflow,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

