export const «cc1» = async («cc2», { «cc3» = «x1», signal } = {}) => {
  const url = `${BASE_URL}/v1/«kb1»/${encodeURIComponent(«cc2»)}?limit=${«cc3»}`;
  const res = await fetch(url, { signal, headers: { "x-request-id": "«u1»" } });
  if (!res.ok) {
    throw new Error(`«cc1» failed: ${res.status} ${res.statusText}`);
  }
  const data = await res.json();
  return data?.items?.map((it) => ({ ...it, «cc4»: it.«cc4» ?? null })) ?? [];
};

