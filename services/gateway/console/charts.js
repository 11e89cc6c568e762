// Charts of the console: admitted vs refused per hour (and the admitted requests the pets service
// did not serve), drawn by uPlot on a canvas, with the same figures in a table for screen readers
// and for anyone who wants the numbers.

import htm from 'htm';
import { h } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

const html = htm.bind(h);

/** Width of the chart's box; uPlot needs pixels. */
function widthOf(el) {
  return Math.max(280, Math.floor(el.getBoundingClientRect().width));
}

/**
 * @param {{ title: string, rows: Array<{ start: string, admitted: number, refused: number, upstreamFailed: number }> }} props
 */
export function HourlyChart({ title, rows }) {
  const box = useRef(null);
  useEffect(() => {
    if (!box.current) return undefined;
    const xs = rows.map((r) => Date.parse(r.start) / 1000);
    // Side by side in each hour: admitted left of the hour's tick, refused right of it. Failed
    // upstream (admitted, not served, not billed) is stacked on the admitted bar: its bar, drawn
    // first, reaches admitted + failed, and the admitted bar covers all of it but its top.
    const left = uPlot.paths.bars({ size: [0.45, 20], align: -1 });
    const right = uPlot.paths.bars({ size: [0.45, 20], align: 1 });
    // An empty hour draws nothing, not a bar of height 0.
    const values = (field) => rows.map((r) => (r[field] > 0 ? r[field] : null));
    const plot = new uPlot(
      {
        width: widthOf(box.current),
        height: 220,
        // Half an hour either side, so the first and the current hour's bars are whole.
        scales: { x: { time: true, range: (_u, min, max) => [min - 1800, max + 1800] } },
        legend: { show: true },
        series: [
          {},
          {
            label: 'failed upstream',
            stroke: '#8a5a00',
            fill: '#c98a00',
            paths: left,
            points: { show: false },
            // The legend says how many failed, not the height of the stack.
            value: (_u, _v, _s, i) => (i === null || i === undefined ? '' : String(rows[i].upstreamFailed)),
          },
          { label: 'admitted', stroke: '#1d6f42', fill: '#2e9a5c', paths: left, points: { show: false } },
          { label: 'refused', stroke: '#a4262c', fill: '#d13438', paths: right, points: { show: false } },
        ],
        axes: [{}, { size: 60 }],
      },
      [
        xs,
        rows.map((r) => (r.upstreamFailed > 0 ? r.admitted + r.upstreamFailed : null)),
        values('admitted'),
        values('refused'),
      ],
      box.current,
    );
    const resize = () => plot.setSize({ width: widthOf(box.current), height: 220 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.destroy();
    };
  }, [rows]);
  const busy = rows.filter((r) => r.admitted + r.refused + r.upstreamFailed > 0);
  return html`<figure class="chart">
    <figcaption>${title}</figcaption>
    <div ref=${box} class="chart-canvas" aria-hidden="true"></div>
    <details>
      <summary>The figures (${busy.length} ${busy.length === 1 ? 'hour' : 'hours'} with requests)</summary>
      <div class="table-wrap" tabindex="0" role="region" aria-label=${`${title}: figures`}>
        <table data-testid="chart-table">
          <thead><tr><th scope="col">hour (UTC)</th><th scope="col">admitted</th><th scope="col">refused</th><th scope="col">failed upstream</th></tr></thead>
          <tbody>
            ${busy.map(
              (r) =>
                html`<tr><td>${r.start.slice(0, 13).replace('T', ' ')}h</td><td>${r.admitted}</td><td>${r.refused}</td><td>${r.upstreamFailed}</td></tr>`,
            )}
          </tbody>
        </table>
      </div>
    </details>
  </figure>`;
}
