package bench

import (
	"fmt"
	"html"
	"io"
	"strings"
)

// The plot's geometry, in SVG pixels.
const (
	plotW, plotH   = 800, 460
	plotLeft       = 70
	plotRight      = 20
	panelH         = 150
	throughputTop  = 50
	latencyTop     = throughputTop + panelH + 60
	plotInnerWidth = plotW - plotLeft - plotRight
)

// WriteSVG draws the run over time: the answers in each step of the timeline (bars, as a rate
// per second) above their 99th percentile latency (line), with the fault, if any, marked where it
// struck.
func (r Result) WriteSVG(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	title := fmt.Sprintf("seckill bench, %s mode, %d node(s): %d requests, %.0f/s; p50 %.1f, p99 %.1f, p99.9 %.1f ms",
		r.Mode, r.Nodes, r.All.Count, r.RPS, r.All.P50, r.All.P99, r.All.P999)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="13">%s</text>`+"\n", plotLeft, html.EscapeString(title))

	tl := r.Timeline
	n := len(tl.Answers)
	if n == 0 || tl.StepS <= 0 {
		b.WriteString("</svg>\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	span := float64(n) * tl.StepS
	x := func(sec float64) float64 { return plotLeft + float64(plotInnerWidth)*sec/span }
	barW := float64(plotInnerWidth) / float64(n)

	var maxCount int64 = 1
	for _, c := range tl.Answers {
		maxCount = max(maxCount, c)
	}
	panel(&b, throughputTop, fmt.Sprintf("answers per second (in steps of %.1f s)", tl.StepS), fmt.Sprintf("%.0f", float64(maxCount)/tl.StepS))
	for i, c := range tl.Answers {
		h := float64(panelH) * float64(c) / float64(maxCount)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#4a7ebb"/>`+"\n",
			x(float64(i)*tl.StepS)+0.5, float64(throughputTop+panelH)-h, max(barW-1, 0.5), h)
	}

	maxP99 := 1.0
	for _, v := range tl.P99 {
		maxP99 = max(maxP99, v)
	}
	panel(&b, latencyTop, "p99 latency of the answers of each step (ms)", fmt.Sprintf("%.0f", maxP99))
	var pts []string
	for i, v := range tl.P99 {
		if tl.Answers[i] == 0 {
			continue
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x((float64(i)+0.5)*tl.StepS), float64(latencyTop+panelH)-float64(panelH)*v/maxP99))
	}
	fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#c0504d" stroke-width="2"/>`+"\n", strings.Join(pts, " "))

	fmt.Fprintf(&b, `<text x="%d" y="%d">0 s</text><text x="%d" y="%d" text-anchor="end">%.1f s</text>`+"\n",
		plotLeft, latencyTop+panelH+18, plotW-plotRight, latencyTop+panelH+18, span)
	if f := r.Fault; f != nil {
		fx := x(f.AtS)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-dasharray="4 3"/>`+"\n",
			fx, throughputTop, fx, latencyTop+panelH)
		anchor, tx := "start", fx+4
		if fx > plotW/2 {
			anchor, tx = "end", fx-4
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s">%s (back after %.2f s)</text>`+"\n",
			tx, throughputTop+14, anchor, html.EscapeString(faultText[f.Kind]), f.RecoveryS)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// panel draws a panel's frame, its title and its top value.
func panel(b *strings.Builder, top int, title, maxLabel string) {
	fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", plotLeft, top-8, html.EscapeString(title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", plotLeft, top, plotInnerWidth, panelH)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", plotLeft-6, top+12, maxLabel)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">0</text>`+"\n", plotLeft-6, top+panelH)
}
