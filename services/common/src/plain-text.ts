// Apart from validation.ts so that what only shows text (the keys CLI) loads no Ajv: with TypeBox
// kept out too, a CLI start loads 59 modules instead of 500 (~150 ms instead of ~400 here).

/**
 * Whether a code point is one that must not be in display text: C0 and C1 controls (NUL, ESC,
 * newlines, DEL among them), which can rewrite a terminal or split a log line, and the bidi
 * embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), which make text read in
 * another order than it is stored. A lone surrogate (U+D800–U+DFFF) is no character at all.
 */
export function isUnsafeCodePoint(cp: number): boolean {
  return (
    cp < 0x20 ||
    (cp >= 0x7f && cp <= 0x9f) ||
    (cp >= 0x202a && cp <= 0x202e) ||
    (cp >= 0x2066 && cp <= 0x2069) ||
    (cp >= 0xd800 && cp <= 0xdfff)
  );
}

/** Whether text is safe to show as it is: no code point isUnsafeCodePoint refuses. */
export function isPlainText(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      // A high surrogate followed by a low one is one code point beyond the BMP (an emoji): fine.
      const next = text.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
      i++;
    } else if (isUnsafeCodePoint(unit)) {
      return false;
    }
  }
  return true;
}

/**
 * A string format for names people read (a pet's, a key's): `format: PLAIN_TEXT` in a schema
 * refuses what isPlainText refuses, with PLAIN_TEXT_RULE as the message.
 */
export const PLAIN_TEXT = 'plain-text';
export const PLAIN_TEXT_RULE = 'must not contain control or bidirectional-override characters';
