"""The analysts' HTML report: page assembly, the similarity data for choosing a threshold, and dependency-free SVG charts."""
