pub trait «C1»<'a, T>: Send + Sync
where
    T: AsRef<[u8]> + 'a,
{
    fn «id1»(&self, input: T) -> Box<dyn Iterator<Item = (usize, &'a str)> + 'a>;

    fn «id2»(&self) -> Option<&'static str> {
        None // «cm1»
    }
}

macro_rules! «id3» {
    ($($k:expr => $v:expr),* $(,)?) => {{
        let mut m = ::std::collections::HashMap::new();
        $( m.insert($k, $v); )*
        m
    }};
}

