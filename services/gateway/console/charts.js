// @ts-check
// Charts of the console: requests per hour (or per day of a customer's calendar) as bars, one per series side by side in each hour,
// drawn by uPlot on a canvas, with the same figures in a table for screen readers and for anyone
// who wants the numbers.

import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { barStarts, barWidth, localDate, localHour } from './figures.js';
import { DataTable, html } from './ui.js';

const HOUR_S = 3600;
const DAY_S = 24 * HOUR_S;
const HEIGHT = 220;
/** The narrowest a bar is drawn, in CSS pixels: one busy hour among 168 is still seen. */
const MIN_BAR_PX = 5;

/**
 * What an hourly chart shows, in order: a field of each row, its name in the legend and the
 * table, its colours. Another count of the history (upstream failures, say) is one more entry.
 */
const HOURLY_SERIES = [
  { field: 'admitted', label: 'admitted', stroke: '#1d6f42', fill: '#2e9a5c' },
  { field: 'refused', label: 'refused (429)', stroke: '#a4262c', fill: '#d13438' },
  // Refused for want of credits: 402, apart from the 429s of limits and bans.
  { field: 'outOfCredits', label: 'out of credits (402)', stroke: '#4b2a82', fill: '#6b3fa0' },
  // Admitted, then not served by the pets service: counted against the limit, not billed.
  { field: 'upstreamFailed', label: 'failed upstream', stroke: '#8a5a00', fill: '#c98a00' },
];

/** Width of the chart's box; uPlot needs pixels. */
function widthOf(el) {
  return Math.max(280, Math.floor(el.getBoundingClientRect().width));
}

/**
 * How wide each of `count` bars of an hour is on this chart (figures.js, barWidth).
 * @param {uPlot} u
 * @param {number} count
 */
function barsOf(u, count, stepSeconds) {
  return barWidth(u.valToPos(stepSeconds, 'x') - u.valToPos(0, 'x'), count, MIN_BAR_PX, stepSeconds);
}

/**
 * The hours the chart was given, as it was given them: an array of epoch seconds.
 * @param {uPlot} u
 */
const xs = (u) => /** @type {number[]} */ (u.data[0]);

/**
 * Bars for the `index`-th of `count` series: side by side, centred on their hour's tick, so a
 * third series is one more bar beside the others.
 */
function barsFor(index, count, stepSeconds) {
  // Defined in every build of uPlot; its types leave it optional.
  const bars = /** @type {NonNullable<typeof uPlot.paths.bars>} */ (uPlot.paths.bars);
  return bars({
    size: [1, Number.POSITIVE_INFINITY, MIN_BAR_PX],
    disp: {
      x0: {
        unit: 1,
        values: (u) => {
          return barStarts(xs(u), index, count, barsOf(u, count, stepSeconds).seconds);
        },
      },
      size: { unit: 1, values: (u) => xs(u).map(() => barsOf(u, count, stepSeconds).seconds) },
    },
  });
}

/**
 * How far the x scale reaches beyond the first and the last step: half a step, or more when the
 * bars of a step, at their narrowest, are wider than that, so the edge never clips them.
 */
function edgePadding(u, min, max, count, stepSeconds) {
  const plotPx = u.bbox.width > 0 ? u.bbox.width / uPlot.pxRatio : u.width;
  const stepPx = plotPx / ((max - min) / stepSeconds + 1);
  const barPx = Math.max(MIN_BAR_PX, (0.8 * stepPx) / count);
  return Math.max(stepSeconds / 2, ((count * barPx) / 2 + 1) * (stepSeconds / stepPx));
}

/** Counts are whole: ticks at 1, 2, 5, 10, 20, 50, … */
const WHOLE_INCREMENTS = Array.from({ length: 10 }, (_, power) => [1, 2, 5].map((m) => m * 10 ** power)).flat();

/**
 * The steps a chart may count in: an hour or a day (23 to 25 hours; its bars are drawn a nominal
 * day wide), each shown on the clock of the chart's zone (a customer's, or UTC), which it names.
 */
const STEPS = {
  hour: { seconds: HOUR_S, column: (zone) => `hour (${zone})`, text: (iso, zone) => localHour(iso, zone) },
  day: { seconds: DAY_S, column: (zone) => `day (${zone})`, text: (iso, zone) => localDate(iso, zone) },
};

/**
 * Requests per step as bars. `rows` are the history's steps; `span` ([start, end), ISO), when
 * given, is the whole range the x axis shows even where no step is yet (the rest of a billing
 * period); `timeZone` is the zone its axis and figures are in.
 * @param {{ title: string, rows: Array<{ start: string } & Record<string, number>>, series?: typeof HOURLY_SERIES,
 *   step?: 'hour' | 'day', timeZone?: string, span?: [string, string], testid?: string }} props
 */
export function UsageChart({
  title,
  rows,
  series = HOURLY_SERIES,
  step = 'hour',
  timeZone = 'UTC',
  span,
  testid = 'chart-table',
}) {
  const unit = STEPS[step];
  const box = useRef(null);
  useEffect(() => {
    if (!box.current) return undefined;
    const xs = rows.map((r) => Date.parse(r.start) / 1000);
    // An empty hour draws nothing, not a bar of height 0.
    const values = (field) => rows.map((r) => (r[field] > 0 ? r[field] : null));
    const plot = new uPlot(
      {
        width: widthOf(box.current),
        height: HEIGHT,
        // The axis in the chart's zone: a customer's hours and days are on its clock.
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), timeZone),
        scales: {
          // Room either side, so the first and the current hour's bars are whole.
          x: {
            time: true,
            range: (u, min, max) => {
              const [from, to] = span
                ? [Date.parse(span[0]) / 1000, Date.parse(span[1]) / 1000 - unit.seconds]
                : [min, max];
              const pad = edgePadding(u, Math.min(from, min), Math.max(to, max), series.length, unit.seconds);
              return [Math.min(from, min) - pad, Math.max(to, max) + pad];
            },
          },
          // From zero: a bar's height is its count, so 19 refused looks a third of 60 admitted.
          y: { range: (_u, _min, max) => [0, uPlot.rangeNum(0, Math.max(1, max ?? 0), 0.1, true)[1]] },
        },
        legend: { show: true },
        series: [
          {},
          ...series.map((s, i) => ({
            label: s.label,
            stroke: s.stroke,
            fill: s.fill,
            // Fill only: an outline would eat into a narrow bar.
            width: 0,
            paths: barsFor(i, series.length, unit.seconds),
            points: { show: false },
          })),
        ],
        axes: [{}, { size: 60, incrs: WHOLE_INCREMENTS }],
      },
      [xs, ...series.map((s) => values(s.field))],
      box.current,
    );
    const resize = () => plot.setSize({ width: widthOf(box.current), height: HEIGHT });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.destroy();
    };
  }, [rows, series, step, timeZone, span?.[0], span?.[1]]);
  const busy = rows.filter((r) => series.some((s) => r[s.field] > 0));
  return html`<figure class="chart">
    <figcaption>${title}</figcaption>
    <div ref=${box} class="chart-canvas" aria-hidden="true"></div>
    <details>
      <summary>The figures (${busy.length} ${busy.length === 1 ? step : `${step}s`} with requests)</summary>
      <${DataTable} label=${`${title}: figures`} testid=${testid} columns=${[unit.column(timeZone), ...series.map((s) => s.label)]}
        rows=${busy.map((r) => [unit.text(r.start, timeZone), ...series.map((s) => r[s.field])])} />
    </details>
  </figure>`;
}
