// unit cube: two layers of prisms (z < 0.25) under tetrahedra
lc = 0.5;
Point(1) = {0, 0, 0, lc}; Point(2) = {1, 0, 0, lc};
Point(3) = {1, 1, 0, lc}; Point(4) = {0, 1, 0, lc};
Line(1) = {1, 2}; Line(2) = {2, 3}; Line(3) = {3, 4}; Line(4) = {4, 1};
Curve Loop(1) = {1, 2, 3, 4}; Plane Surface(1) = {1};
a[] = Extrude {0, 0, 0.25} { Surface{1}; Layers{2}; Recombine; };
b[] = Extrude {0, 0, 0.75} { Surface{a[0]}; };
Physical Surface("bottom") = {1};
Physical Surface("top") = {b[0]};
Physical Surface("sides") = {a[2], a[3], a[4], a[5], b[2], b[3], b[4], b[5]};
Physical Volume("fluid") = {a[1], b[1]};
