// Jest runs the package's ES modules as they are (no transform; Node's VM modules).
export default { testEnvironment: 'jsdom', testMatch: ['**/jest.test.mjs'], transform: {} };
