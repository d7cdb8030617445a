export class «C1» extends EventEmitter {
  #«cc1» = new Map();
  #«cc2» = 0;

  constructor(options = {}) {
    super();
    this.options = { maxSize: «x1», ttlMs: «n1», ...options };
  }

  // «cm1»
  get size() {
    return this.#«cc1».size;
  }

  «cc3»(key, value) {
    if (this.#«cc1».size >= this.options.maxSize) {
      const oldest = this.#«cc1».keys().next().value;
      this.#«cc1».delete(oldest);
      this.emit("evict", oldest);
    }
    this.#«cc1».set(key, { value, at: Date.now() });
    return ++this.#«cc2»;
  }
}

