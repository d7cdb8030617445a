describe("«cc1»", () => {
  it("handles «s1»", async () => {
    const out = await «cc1»("«s2»");
    expect(out).toHaveLength(«x1»);
    expect(out[0]).toMatchObject({ id: "«u1»", score: «fl1» });
  });

  it.each([
    ["don't", 2],
    ["WE'VE", 3],
    ["<|endoftext|>", 1],
  ])("splits %s into %d pieces", (input, n) => {
    expect(split(input)).toHaveLength(n);
  });
});

