import { «cc1», «cc2» } from "./«kb1»";
import type { «C1» } from "../types/«kb2»";
import * as path from "node:path";

const «K1» = «n1»;
const «K2» = Object.freeze({ «cc3»: "«s1»", retries: «x1», timeoutMs: «x2»_000 });

