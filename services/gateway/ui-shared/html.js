// @ts-check
// The one way both front-ends write markup: htm's tagged templates over preact's h(). Served by
// each app from its own origin (/console/shared/, /portal/shared/), preact and htm from its
// /vendor/, both named by the page's import map.

import htm from 'htm';
import { h } from 'preact';

export const html = htm.bind(h);
