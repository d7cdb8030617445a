#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn «id1»_roundtrip() {
        let s = "«s1»";
        let ids = encode(s).expect("encode");
        assert_eq!(decode(&ids).unwrap(), s, "roundtrip for {s:?}");
        assert!(ids.len() <= «x1»);
    }

    #[test]
    #[should_panic(expected = "index out of bounds")]
    fn «id2»_panics() {
        let v: Vec<u8> = vec![0xde, 0xad, 0xbe, 0xef];
        let _ = v[«x2» + 4];
    }
}

