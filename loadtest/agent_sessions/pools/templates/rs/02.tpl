#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub struct «C1»<'a> {
    pub «id1»: u32,
    pub «id2»: &'a str,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub «id3»: Vec<u64>,
}

