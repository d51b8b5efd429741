// Globals the pages load with a classic <script> before their modules.

interface Window {
  /** Apache ECharts from /static/vendor/echarts.min.js; untyped here. */
  echarts: any;
}
