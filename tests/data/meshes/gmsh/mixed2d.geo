// two unit squares: triangles on the left, quads on the right (Gmsh 2.2 format)
lc = 0.34;
Point(1) = {0, 0, 0, lc}; Point(2) = {1, 0, 0, lc}; Point(3) = {2, 0, 0, lc};
Point(4) = {2, 1, 0, lc}; Point(5) = {1, 1, 0, lc}; Point(6) = {0, 1, 0, lc};
Line(1) = {1, 2}; Line(2) = {2, 3}; Line(3) = {3, 4}; Line(4) = {4, 5};
Line(5) = {5, 6}; Line(6) = {6, 1}; Line(7) = {2, 5};
Curve Loop(1) = {1, 7, 5, 6}; Plane Surface(1) = {1};
Curve Loop(2) = {2, 3, 4, -7}; Plane Surface(2) = {2};
Transfinite Curve{2, 3, 4, 7} = 4; Transfinite Surface{2}; Recombine Surface{2};
Physical Curve("left") = {6};
Physical Curve("right") = {3};
Physical Curve("walls") = {1, 2, 4, 5};
Physical Surface("fluid") = {1, 2};
