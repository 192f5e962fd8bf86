'use strict';
// The loaded native binding, shared by every module.
const { load } = require('./native.js');

/** @type {import('../binding')} the generated, checked-in types of the raw binding */
const binding = load();

module.exports = { binding };
