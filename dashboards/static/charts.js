// Draws every chart of each [data-series] container from its JSON endpoint (uPlot).
// A click on a chart opens the report of the run under the cursor.
(function () {
  "use strict";
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];

  function draw(container, chart) {
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
    var data = [chart.x];
    var series = [{}];
    chart.series.forEach(function (s, i) {
      data.push(s.values);
      series.push({label: s.label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: false,
                   points: {show: chart.x.length < 60}});
    });
    if (chart.threshold) {
      data.push(chart.threshold);
      series.push({label: "threshold", stroke: "#555", dash: [6, 4], width: 1, points: {show: false}});
    }
    var width = Math.max(320, box.clientWidth - 12);
    var plot = new uPlot({width: width, height: 220, series: series, scales: {x: {time: true}},
                          legend: {live: true}, cursor: {drag: {x: false, y: false}}}, data, box);
    plot.over.addEventListener("click", function () {
      var idx = plot.cursor.idx;
      var run = (idx !== null && idx !== undefined && chart.runs) ? chart.runs[idx] : null;
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
        body.charts.forEach(function (chart) { draw(container, chart); });
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
