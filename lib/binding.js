'use strict';
// The loaded native binding, shared by every module.
const { load, platformTriple } = require('./native.js');

module.exports = { binding: load(), platformTriple };
