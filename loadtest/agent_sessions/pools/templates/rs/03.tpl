impl «C1» {
    /// «doc1»
    pub fn «id1»(&mut self, «w1»: &[u32]) -> Result<usize, «C2»Error> {
        let mut n = 0usize;
        for (i, &t) in «w1».iter().enumerate() {
            match t {
                0 => continue,
                1..=«x1» => n += 1,
                t if t > «n1» => return Err(«C2»Error::OutOfRange { index: i, value: t }),
                _ => {
                    self.«id2».entry(t).or_insert_with(Vec::new).push(i as u32);
                    n = n.checked_add(2).ok_or(«C2»Error::Overflow)?;
                }
            }
        }
        Ok(n)
    }
}

