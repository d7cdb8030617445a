### Usage

```bash
pip install «kb1»
«kb1» serve --port 8000 --«kb2» «x1»
```

- **«w1»**: «doc1»
- *«w2»*: «doc2»
    - nested item with `inline code` and a [link](https://example.com/«kb2»?q=«x2»&lang=ja)
1. First step «e1»
2. Second step — don't skip it

> **Note**
> «cm1»

