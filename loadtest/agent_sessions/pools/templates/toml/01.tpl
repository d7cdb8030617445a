[package]
name = "«kb1»"
version = "«x1».«x2».«x3»"
edition = "2021"
authors = ["«user» <«user»@example.com>"]

[dependencies]
serde = { version = "1.0", features = ["derive"] }
tokio = { version = "1", features = ["rt-multi-thread", "macros"] }
anyhow = "1"

[profile.release]
lto = "fat"
codegen-units = 1

