const «K1»_RE = /^(?<key>[\w.-]+)\s*[:=]\s*(?<val>.*?)\s*$/gmu;
const «K2» = /[\u0300-\u036f]/g; // strip combining marks
export const «cc1» = (s) => s.normalize("NFD").replace(«K2», "").toLowerCase();
module.exports = { «cc1», «K1»_RE, version: "«x1».«x2».«x3»" };

