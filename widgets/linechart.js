// streamcell's dashboard line chart (anywidget). No imports: charts.py bundles this snippet
// with Vega-Embed, Vega-Lite and Vega (vl-convert's javascript_bundle, which provides
// `vegaEmbed`), or prepends a CDN import of Vega-Embed when no bundle can be built.
//
// The chart is embedded once per view; a new history only replaces the rows of its named
// data set ("rows") in the live Vega view (View.data + runAsync), so a refresh costs no
// re-parse and no DOM rebuild. Every change goes through one queue per view: an embed and a
// data update never overlap (two overlapping embeds into one element race on its children),
// and updates that arrive while one is drawn collapse into one (the latest rows win).

function render({ model, el }) {
  let result = null; // vega-embed's result: { view, finalize }
  let closed = false;
  let queue = Promise.resolve();
  let rowsPending = false;

  const showError = error => {
    const box = document.createElement('div');
    box.className = 'sc-chart-error';
    box.textContent = `chart error: ${error && error.message ? error.message : error}`;
    el.replaceChildren(box);
  };

  const enqueue = task => {
    queue = queue.then(() => (closed ? undefined : task())).catch(showError);
    return queue;
  };

  const embed = async () => {
    if (result !== null) {
      result.finalize();
      result = null;
    }
    el.replaceChildren();
    const spec = structuredClone(model.get('spec'));
    if (!spec || Object.keys(spec).length === 0) {
      return;
    }
    spec.data = { name: 'rows', values: structuredClone(model.get('rows') ?? []) };
    const options = structuredClone(model.get('embed_options') ?? {});
    const embedded = await vegaEmbed(el, spec, { mode: 'vega-lite', ...options });
    if (closed) {
      embedded.finalize();
      return;
    }
    result = embedded;
  };

  const drawRows = async () => {
    rowsPending = false;
    if (result === null) {
      return;
    }
    result.view.data('rows', structuredClone(model.get('rows') ?? []));
    await result.view.runAsync();
  };

  const onSpec = () => enqueue(embed);
  const onRows = () => {
    if (!rowsPending) {
      rowsPending = true;
      enqueue(drawRows);
    }
  };
  model.on('change:spec', onSpec);
  model.on('change:embed_options', onSpec);
  model.on('change:rows', onRows);
  enqueue(embed);

  return () => {
    closed = true;
    model.off('change:spec', onSpec);
    model.off('change:embed_options', onSpec);
    model.off('change:rows', onRows);
    if (result !== null) {
      result.finalize();
      result = null;
    }
  };
}

export default { render };
