// Jest's defaults (CommonJS, babel-jest), in jsdom.
module.exports = { testEnvironment: 'jsdom', testMatch: ['**/jest.test.js'] };
