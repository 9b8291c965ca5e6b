// What a CommonJS Jest project has: babel-jest (Jest's default transform)
// turns the tests' `import`s into `require()`s.
module.exports = { plugins: ['@babel/plugin-transform-modules-commonjs'] };
