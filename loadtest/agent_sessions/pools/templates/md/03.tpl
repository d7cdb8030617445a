## «x1».«x2».«x3» — «ts1»

### Fixed
- «doc1» (#«n1»)
- Handle `\r\n` line endings in tool outputs (thanks @«user»!)

### Changed
- Bumped `tokenizers` to 0.«x4».«x5»; «doc2»



