#include "tools/svg.h"

#include <math.h>

#define W 720
#define H 440
#define L 70  /* margins */
#define R 20
#define T 40
#define B 60

static const char *const colors[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
				      "#9467bd", "#8c564b", "#e377c2", "#7f7f7f" };

static void esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else
			fputc(*s, f);
	}
}

/* A round tick step giving about 5-10 ticks over [0, max]. */
static double tick_step(double max)
{
	double raw = max / 6, p = pow(10, floor(log10(raw))), m = raw / p;
	return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void num(char *buf, size_t n, double v)
{
	if (v >= 1e9)
		snprintf(buf, n, "%gG", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, n, "%gM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, n, "%gK", v / 1e3);
	else
		snprintf(buf, n, "%g", v);
}

void vc_svg_plot(FILE *f, const char *title, const char *xlabel, const char *ylabel, double xmax,
		 const struct vc_svg_series *s, int ns, const struct vc_svg_mark *m, int nm)
{
	if (!(xmax > 0))
		xmax = 1;
	double pw = W - L - R, ph = H - T - B;
#define X(v) (L + (v) / xmax * pw)
#define Y(v) (T + (1 - (v)) * ph)
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		   "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
		W, H, W, H);
	fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
	fprintf(f, "<text x=\"%d\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">", W / 2);
	esc(f, title);
	fputs("</text>\n", f);
	/* grid and ticks */
	double st = tick_step(xmax);
	char buf[32];
	for (double v = 0; v <= xmax * 1.0001; v += st) {
		num(buf, sizeof buf, v);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", X(v),
			T, X(v), H - B);
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", X(v),
			H - B + 16, buf);
	}
	for (int i = 0; i <= 10; i += 2) {
		double v = i / 10.0;
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L,
			Y(v), W - R, Y(v));
		fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n", L - 6,
			Y(v) + 4, v);
	}
	fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
		   "stroke=\"black\"/>\n",
		L, T, pw, ph);
	fprintf(f, "<text x=\"%.0f\" y=\"%d\" text-anchor=\"middle\">", L + pw / 2, H - 18);
	esc(f, xlabel);
	fprintf(f, "</text>\n<text x=\"16\" y=\"%.0f\" text-anchor=\"middle\" "
		   "transform=\"rotate(-90 16 %.0f)\">",
		T + ph / 2, T + ph / 2);
	esc(f, ylabel);
	fputs("</text>\n", f);
	/* marks */
	for (int i = 0; i < nm; i++) {
		if (!(m[i].x >= 0 && m[i].x <= xmax))
			continue;
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#555\" "
			   "stroke-dasharray=\"4 3\"/>\n",
			X(m[i].x), T, X(m[i].x), H - B);
		fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"#333\" "
			   "transform=\"rotate(-90 %.1f %d)\" text-anchor=\"end\">",
			X(m[i].x) - 3, T + 4, X(m[i].x) - 3, T + 4);
		esc(f, m[i].label);
		fputs("</text>\n", f);
	}
	/* curves */
	for (int k = 0; k < ns; k++) {
		const char *c = colors[k % 8];
		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\"%s points=\"", c,
			s[k].dashed ? " stroke-dasharray=\"6 3\"" : "");
		for (int i = 0; i < s[k].n; i++)
			fprintf(f, "%.1f,%.1f ", X(s[k].x[i]), Y(s[k].y[i]));
		fputs("\"/>\n", f);
		double ly = T + 16 + 16 * k;
		fprintf(f, "<line x1=\"%d\" y1=\"%.0f\" x2=\"%d\" y2=\"%.0f\" stroke=\"%s\" "
			   "stroke-width=\"2\"%s/>\n",
			W - R - 190, ly, W - R - 165, ly, c,
			s[k].dashed ? " stroke-dasharray=\"6 3\"" : "");
		fprintf(f, "<text x=\"%d\" y=\"%.0f\">", W - R - 160, ly + 4);
		esc(f, s[k].name);
		fputs("</text>\n", f);
	}
	fputs("</svg>\n", f);
#undef X
#undef Y
}
