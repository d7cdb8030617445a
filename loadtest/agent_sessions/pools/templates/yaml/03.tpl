x-defaults: &defaults
  restart: unless-stopped
  logging:
    driver: json-file
    options: {max-size: "10m", max-file: "3"}

services:
  «kb1»:
    <<: *defaults
    build: .
    ports: ["8000:8000"]
    environment:
      - DATABASE_URL=postgres://«user»:«h1»@db:5432/«w1»
      - GREETING=«s1»
  db:
    <<: *defaults
    image: postgres:16-alpine

