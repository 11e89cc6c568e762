// @ts-check
// Amounts and counts as both front-ends write them: the console's customer page (billing.js) and
// the portal's usage, credits and invoice pages. One file, so the two cannot write the same amount
// two ways.

/**
 * A count with thousands separators, whatever the browser's locale: 1,493.
 * @param {number} n
 */
export const count = (n) => n.toLocaleString('en-US');

/**
 * Integer minor units as money in a locale: 4950 EUR is €49.50 in en-US, 49,50 € in de-DE. The
 * currency's own digits (0 for JPY, 3 for BHD) place the point in the decimal text, which
 * Intl.NumberFormat formats exactly: no floating point between the admin API's integer and the page.
 * @param {number} minor an integer
 * @param {string} currency ISO 4217
 * @param {string} [locale] the browser's when none
 */
export function money(minor, currency, locale) {
  const format = new Intl.NumberFormat(locale, { style: 'currency', currency });
  const digits = format.resolvedOptions().maximumFractionDigits ?? 2;
  const text = String(Math.abs(minor)).padStart(digits + 1, '0');
  const decimal = digits === 0 ? text : `${text.slice(0, -digits)}.${text.slice(-digits)}`;
  // A string, read as a decimal: ES2023's Intl.NumberFormat takes one (lib.es2023 does not say so).
  return format.format(/** @type {any} */ (`${minor < 0 ? '-' : ''}${decimal}`));
}
