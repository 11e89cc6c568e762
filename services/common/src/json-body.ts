import type { FastifyInstance } from 'fastify';
import { ApiError } from './errors.js';
import { jsonNestingExceeds, MAX_JSON_DEPTH } from './validation.js';

const TOO_DEEP = `Request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`;
const NOT_UTF8 = 'Request body is not valid UTF-8 (JSON is UTF-8 text)';

/** `fatal`: bytes that are not UTF-8 throw, where by default each would become U+FFFD. */
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Bodies are JSON only, read by fastify's own parser (prototype poisoning refused) behind two
 * checks: the bytes must be UTF-8, or a name would be stored with U+FFFD in place of what the
 * client sent; and the nesting must not exceed MAX_JSON_DEPTH, since parsing time grows with it
 * and no body here nests anywhere near that deep. Either is a 400 naming the body.
 */
export function strictJsonBodies(app: FastifyInstance): void {
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
    if (jsonNestingExceeds(text, MAX_JSON_DEPTH)) done(new ApiError(400, 'invalid_request', TOO_DEEP), undefined);
    else parseJson(request, text, done);
  });
}
