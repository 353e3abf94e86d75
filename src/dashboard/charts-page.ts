/**
 * The "Charts" section both dashboard pages carry when the dashboard takes
 * charts (`chartToken`): the charts command line tools sent, newest first,
 * each shown as an `<img>` of its SVG (an image runs no script). Hidden
 * while there are none; the list is read again every few seconds.
 */

/** The markup of the section, hidden until a chart arrives. */
export const CHARTS_SECTION = `
<section id="charts-panel" data-testid="charts-panel" hidden>
  <h2>Charts <span class="muted small">sent by redeliver plan and redeliver simulate</span></h2>
  <div id="charts" class="charts"></div>
</section>`;

/** Its style rules. */
export const CHARTS_STYLE = `
.charts figure { margin: 0 0 16px; }
.charts figcaption { font-size: 13px; margin-bottom: 4px; }
.charts img { display: block; max-width: 100%; height: auto; background: #fff; border: 1px solid var(--line); border-radius: 6px; }
`;

/** How often the list of charts is read again, in milliseconds. */
const CHART_POLL_MS = 3000;

/**
 * Its script, run after the page helpers (`$`, `el`, `api`, `time`). The
 * images are rebuilt only when the list changes, so a shown chart does not
 * flicker.
 */
export const CHARTS_SCRIPT = `
  let shownCharts = null;
  async function refreshCharts() {
    let data;
    try { data = await api('api/charts'); } catch (e) { return; }
    const ids = data.charts.map((c) => c.id).join(' ');
    if (ids === shownCharts) return;
    shownCharts = ids;
    $('charts-panel').hidden = data.charts.length === 0;
    $('charts').replaceChildren(...data.charts.map((c) => el('figure', { testid: 'chart-figure', data: { chart: c.id } },
      el('figcaption', null, c.title, ' ', el('span', { className: 'muted small' }, time(c.at))),
      chartImage(c))));
  }
  function chartImage(c) {
    const img = document.createElement('img');
    img.src = 'api/charts/' + encodeURIComponent(c.id) + '.svg';
    img.alt = c.title;
    img.dataset.testid = 'chart-image';
    return img;
  }
  void refreshCharts();
  setInterval(() => void refreshCharts(), ${CHART_POLL_MS});
`;
