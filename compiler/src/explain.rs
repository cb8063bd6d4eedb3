//! `charter explain CODE`: a paragraph on each diagnostic code with a wrong and a right example.
