import type { FastifyInstance } from 'fastify';
import { ApiError, clipped } from './errors.js';
import { jsonNestingExceeds, MAX_JSON_DEPTH } from './validation.js';

const TOO_DEEP = `Request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`;
const NOT_UTF8 = 'Request body is not valid UTF-8 (JSON is UTF-8 text)';

/** `fatal`: bytes that are not UTF-8 throw, where by default each would become U+FFFD. */
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The first key an object in valid JSON text has twice, compared as decoded (`"name"` and
 * `"n\\u0061me"` are the same key), or null. JSON.parse keeps the last of them silently, so a
 * client and a proxy or log that reads the first would disagree on what was asked.
 */
export function duplicateJsonKey(text: string): string | null {
  // One entry per open array (null) or object (its keys so far).
  const open: Array<Set<string> | null> = [];
  let expectingKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      let end = i + 1;
      while (end < text.length && text.charCodeAt(end) !== 34) end += text.charCodeAt(end) === 92 /* \ */ ? 2 : 1;
      const keys = open.at(-1);
      if (expectingKey && keys) {
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        if (keys.has(key)) return key;
        keys.add(key);
        expectingKey = false;
      }
      i = end;
    } else if (c === 123 /* { */) {
      open.push(new Set());
      expectingKey = true;
    } else if (c === 91 /* [ */) open.push(null);
    else if (c === 125 /* } */ || c === 93 /* ] */) {
      open.pop();
      expectingKey = false;
    } else if (c === 44 /* , */) expectingKey = open.at(-1) != null;
  }
  return null;
}

/**
 * Bodies are JSON only, read by fastify's own parser (prototype poisoning refused) behind two
 * checks: the bytes must be UTF-8, or a name would be stored with U+FFFD in place of what the
 * client sent; and the nesting must not exceed MAX_JSON_DEPTH, since parsing time grows with it
 * and no body here nests anywhere near that deep. Either is a 400 naming the body. With
 * `refuseDuplicateKeys`, an object with a key twice is a 400 naming the key (duplicateJsonKey).
 */
export function strictJsonBodies(app: FastifyInstance, options: { refuseDuplicateKeys?: boolean } = {}): void {
  // fastify would otherwise also accept text/plain.
  app.removeContentTypeParser('text/plain');
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    let text: string;
    try {
      text = utf8.decode(body as Buffer);
    } catch {
      done(new ApiError(400, 'invalid_request', NOT_UTF8), undefined);
      return;
    }
    if (jsonNestingExceeds(text, MAX_JSON_DEPTH)) {
      done(new ApiError(400, 'invalid_request', TOO_DEEP), undefined);
      return;
    }
    if (!options.refuseDuplicateKeys) {
      parseJson(request, text, done);
      return;
    }
    parseJson(request, text, (error, value) => {
      // Only valid JSON is scanned: the parse's own 400 comes first.
      const key = error ? null : duplicateJsonKey(text);
      if (key === null) done(error, value);
      else
        done(
          new ApiError(
            400,
            'invalid_request',
            `Request body has the key ${JSON.stringify(clipped(key))} twice in one object`,
          ),
          undefined,
        );
    });
  });
}
