/* Line plots as SVG, for miss-ratio curves: no dependencies, one file. */
#ifndef VC_TOOLS_SVG_H
#define VC_TOOLS_SVG_H

#include <stdio.h>

struct vc_svg_series {
	const char *name;
	const double *x, *y;
	int n;
	int dashed;
};

struct vc_svg_mark {
	double x;          /* a vertical line at x, labelled */
	const char *label;
};

/* Plots the series over x in [0, xmax] and y in [0, 1], with axis titles,
 * ticks, a legend and the marks. */
void vc_svg_plot(FILE *f, const char *title, const char *xlabel, const char *ylabel, double xmax,
		 const struct vc_svg_series *s, int ns, const struct vc_svg_mark *m, int nm);

#endif
