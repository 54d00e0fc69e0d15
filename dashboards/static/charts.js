// Draws every chart of each [data-series] container from its JSON endpoint (uPlot).
// A click on a chart opens the report of the run under the cursor. The x axis spans the chosen
// range (the answer's start and end), not just the points, and a threshold is drawn across it,
// so one run still shows where its threshold lies.
(function () {
  "use strict";
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];

  // the threshold carried to the range's edges: a dashed line even under a single point
  function withEdges(chart, start, end) {
    var x = chart.x.slice(), runs = (chart.runs || []).slice();
    var values = chart.series.map(function (s) { return s.values.slice(); });
    var threshold = chart.threshold ? chart.threshold.slice() : null;
    function known(list, from, step) {
      for (var i = from; i >= 0 && i < list.length; i += step) { if (list[i] !== null) { return list[i]; } }
      return null;
    }
    if (start !== null && start < x[0]) {
      x.unshift(start); runs.unshift(null);
      values.forEach(function (v) { v.unshift(null); });
      if (threshold) { threshold.unshift(known(threshold, 0, 1)); }
    }
    if (end !== null && end > x[x.length - 1]) {
      x.push(end); runs.push(null);
      values.forEach(function (v) { v.push(null); });
      if (threshold) { threshold.push(known(threshold, threshold.length - 1, -1)); }
    }
    return {x: x, runs: runs, values: values, threshold: threshold};
  }

  function draw(container, chart, start, end) {
    var box = document.createElement("div");
    box.className = "chart" + (chart.drifted ? " drifted" : "");
    box.dataset.chartId = chart.id;
    var title = document.createElement("h3");
    title.textContent = chart.title + (chart.unit ? " (" + chart.unit + ")" : "");
    box.appendChild(title);
    container.appendChild(box);
    if (!chart.x.length) {
      var empty = document.createElement("p");
      empty.className = "muted";
      empty.textContent = "no data in this range";
      box.appendChild(empty);
      return;
    }
    var edged = withEdges(chart, start, end);
    var data = [edged.x];
    var series = [{}];
    chart.series.forEach(function (s, i) {
      data.push(edged.values[i]);
      series.push({label: s.label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: false,
                   points: {show: chart.x.length < 60, size: chart.x.length < 4 ? 9 : 5,
                            fill: COLORS[i % COLORS.length]}});
    });
    if (edged.threshold) {
      data.push(edged.threshold);
      series.push({label: "threshold", stroke: "#555", dash: [6, 4], width: 1, spanGaps: true,
                   points: {show: false}});
    }
    var lo = start !== null ? Math.min(start, edged.x[0]) : edged.x[0];
    var hi = end !== null ? Math.max(end, edged.x[edged.x.length - 1]) : edged.x[edged.x.length - 1];
    if (lo === hi) { lo -= 1800; hi += 1800; }
    var width = Math.max(320, box.clientWidth - 12);
    // where the axis and the threshold ended up, once drawn (for a look at what was drawn)
    function drawn(u) {
      box.dataset.xMin = String(u.scales.x.min);
      box.dataset.xMax = String(u.scales.x.max);
      var level = edged.threshold ? edged.threshold[edged.threshold.length - 1] : null;
      if (level !== null) {
        box.dataset.thresholdY = String(Math.round(u.valToPos(level, "y", true)));
        box.dataset.plotLeft = String(Math.round(u.bbox.left));
        box.dataset.plotWidth = String(Math.round(u.bbox.width));
      }
    }
    var plot = new uPlot({width: width, height: 220, series: series,
                          scales: {x: {time: true, range: function () { return [lo, hi]; }}},
                          legend: {live: true}, cursor: {drag: {x: false, y: false}},
                          hooks: {draw: [drawn]}}, data, box);
    plot.over.addEventListener("click", function () {
      var idx = plot.cursor.idx;
      var run = (idx !== null && idx !== undefined) ? edged.runs[idx] : null;
      if (run !== null && run !== undefined) {
        window.location.href = "/reports/" + run;
      }
    });
    box.dataset.seriesCount = String(series.length - 1);
  }

  function load(container) {
    fetch(container.dataset.series, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.json();
      })
      .then(function (body) {
        var start = typeof body.start === "number" ? body.start : null;
        var end = typeof body.end === "number" ? body.end : null;
        body.charts.forEach(function (chart) { draw(container, chart, start, end); });
        if (!body.charts.length) {
          var none = document.createElement("p");
          none.className = "muted";
          none.textContent = "no results for this selection in this range";
          container.appendChild(none);
        }
        container.dataset.loaded = String(body.charts.length);
      })
      .catch(function (err) {
        var p = document.createElement("p");
        p.className = "muted";
        p.textContent = "could not load chart data: " + err.message;
        container.appendChild(p);
        container.dataset.loaded = "error";
      });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-series]").forEach(load);
  });
})();
