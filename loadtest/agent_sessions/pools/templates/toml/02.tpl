[tool.ruff]
line-length = «x1»0
target-version = "py311"

[tool.ruff.lint]
select = ["E", "F", "W", "I", "B", "UP"]
ignore = ["E501"]   # «cm1»

[tool.pytest.ini_options]
addopts = "-q --strict-markers"
markers = ["slow: long runs", "gpu: needs CUDA"]

