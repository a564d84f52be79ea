// The worker thread call-parser.ts starts for large API call bodies and XML-RPC documents: each message is one
// body, answered with the call (its parameters flat), the value, or the protocol's refusal in words.
import { parentPort } from "node:worker_threads";
import { type FlatValues, KIND, type ParseAnswer, type ParseRequest } from "./call-parser.ts";
import { JsonRpcRequestError, parseJsonRpcCall } from "./json-rpc.ts";
import { parseXmlRpcCall, parseXmlRpcValue, XmlRpcParseError } from "./xml-rpc.ts";
import { XenDouble, type XenValue } from "./values.ts";

function flatten(values: XenValue[]): FlatValues {
  const kinds: number[] = [];
  const strings: string[] = [];
  const numbers: number[] = [];
  const add = (value: XenValue): void => {
    if (typeof value === "string") {
      kinds.push(KIND.STRING);
      strings.push(value);
    } else if (typeof value === "number") {
      kinds.push(KIND.NUMBER);
      numbers.push(value);
    } else if (typeof value === "boolean") kinds.push(value ? KIND.TRUE : KIND.FALSE);
    else if (value === null) kinds.push(KIND.NULL);
    else if (value instanceof XenDouble) {
      kinds.push(KIND.DOUBLE);
      numbers.push(value.value);
    } else if (Array.isArray(value)) {
      kinds.push(KIND.ARRAY);
      value.forEach(add);
      kinds.push(KIND.END);
    } else {
      kinds.push(KIND.OBJECT);
      for (const [key, member] of Object.entries(value)) {
        strings.push(key);
        add(member);
      }
      kinds.push(KIND.END);
    }
  };
  add(values);
  const ends = new Uint32Array(strings.length);
  const text = Buffer.allocUnsafeSlow(strings.reduce((sum, string) => sum + Buffer.byteLength(string), 0));
  let end = 0;
  for (const [i, string] of strings.entries()) ends[i] = end += text.write(string, end);
  return { kinds: Uint8Array.from(kinds), text: new Uint8Array(text.buffer), ends, numbers: Float64Array.from(numbers) };
}

function answer({ protocol, chunks, limits }: ParseRequest): ParseAnswer {
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    if (protocol === "xml-value") return { call: null, params: flatten([parseXmlRpcValue(text, limits)]) };
    const { params, ...call } = protocol === "json" ? parseJsonRpcCall(text, limits) : parseXmlRpcCall(text, limits);
    return { call, params: flatten(params) };
  } catch (error) {
    if (error instanceof JsonRpcRequestError) return { refused: { message: error.message, rpcCode: error.rpcCode, id: error.id, version: error.version } };
    if (error instanceof XmlRpcParseError) return { refused: { message: error.message } };
    throw error;
  }
}

parentPort!.on("message", (request: ParseRequest) => {
  const reply = answer(request);
  parentPort!.postMessage(reply, "params" in reply ? [reply.params.kinds.buffer, reply.params.text.buffer, reply.params.ends.buffer, reply.params.numbers.buffer] : []);
});
