"""The maths and toy tasks of the teaching pages: masks, scaling, positions, one row's arithmetic, the layer walk, the toy translator and the span-trained encoder."""
